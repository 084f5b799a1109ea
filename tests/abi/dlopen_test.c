/* Loads libaccel with dlopen(RTLD_NOW | RTLD_LOCAL), as the bindings do, and calls it through dlsym. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef const char *(*string_fn)(void);
typedef int (*options_new_fn)(void **);
typedef int (*options_set_fn)(void *, const char *, const char *);
typedef void (*options_free_fn)(void *);

int main(int argc, char **argv) {
  void *library, *options = NULL;
  string_fn version, last_error;
  options_new_fn options_new;
  options_set_fn options_set;
  options_free_fn options_free;
  int code;
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_test LIBRARY\n");
    return 2;
  }
  library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  *(void **)&version = dlsym(library, "accel_version_string");
  *(void **)&last_error = dlsym(library, "accel_error_last");
  *(void **)&options_new = dlsym(library, "accel_options_new");
  *(void **)&options_set = dlsym(library, "accel_options_set");
  *(void **)&options_free = dlsym(library, "accel_options_free");
  if (!version || !last_error || !options_new || !options_set || !options_free) {
    fprintf(stderr, "dlsym: a symbol is missing\n");
    return 1;
  }
  if (dlsym(library, "_ZN5accel5ErrorD0Ev") != NULL) {
    fprintf(stderr, "an internal C++ symbol is exported\n");
    return 1;
  }
  if (options_new(&options) != 0) return 1;
  code = options_set(options, "bogus", "1");
  printf("accel %s loaded; unknown option gives %d: %s\n", version(), code, last_error());
  options_free(options);
  if (code != -3 || strstr(last_error(), "bogus") == NULL) return 1;
  return dlclose(library) == 0 ? 0 : 1;
}
