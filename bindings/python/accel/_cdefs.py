"""The C declarations the binding calls, copied from the public headers (capi/accel.h and capi/accel/*.h).

One section per header, in the umbrella header's include order, and inside each section the declarations
in the header's order, so that a reader can hold the two side by side. Comments, ACCEL_API and
ACCEL_NODISCARD are left out; integer macros are kept (cffi reads them as constants). The last section
declares the DLPack structs that accel/tensor.h only forward-declares, as LibTorch 1.13's ATen/dlpack.h
(DLPack 0.6) defines them: the binding builds and reads DLManagedTensor itself.

tests/test_cdefs_match_headers.py compiles these declarations against the real headers (cffi API mode),
so a declaration that drifts from its header fails there.
"""

SECTIONS = (
    ("accel/common.h", """
#define ACCEL_OK 0
#define ACCEL_ERR_INVALID_ARGUMENT -1
#define ACCEL_ERR_NULL_ARGUMENT -2
#define ACCEL_ERR_UNKNOWN_OPTION -3
#define ACCEL_ERR_BAD_OPTION_VALUE -4
#define ACCEL_ERR_DTYPE -5
#define ACCEL_ERR_SHAPE_MISMATCH -6
#define ACCEL_ERR_TIMEOUT -7
#define ACCEL_ERR_PEER_FAILED -8
#define ACCEL_ERR_INVALID_STATE -9
#define ACCEL_ERR_ENVIRONMENT -10
#define ACCEL_ERR_IO -11
#define ACCEL_ERR_CALLBACK -12
#define ACCEL_ERR_UNSUPPORTED -13
#define ACCEL_ERR_OUT_OF_RANGE -14
#define ACCEL_ERR_TORCH -15
#define ACCEL_ERR_OUT_OF_MEMORY -16
#define ACCEL_ERR_INTERNAL -17
const char *accel_error_last(void);
const char *accel_error_name(int code);
void accel_string_free(char *text);
"""),
    ("accel/version.h", """
#define ACCEL_VERSION_MAJOR 0
#define ACCEL_VERSION_MINOR 2
#define ACCEL_VERSION_PATCH 0
int accel_version_major(void);
int accel_version_minor(void);
int accel_version_patch(void);
const char *accel_version_string(void);
const char *accel_version_torch(void);
int accel_version_has_feature(const char *name);
const char *accel_version_features(void);
"""),
    ("accel/options.h", """
typedef struct accel_options accel_options_t;
int accel_options_new(accel_options_t **out);
void accel_options_free(accel_options_t *options);
int accel_options_set_bool(accel_options_t *options, const char *key, int value);
int accel_options_set_int(accel_options_t *options, const char *key, int64_t value);
int accel_options_set_double(accel_options_t *options, const char *key, double value);
int accel_options_set_string(accel_options_t *options, const char *key, const char *value);
int accel_options_set(accel_options_t *options, const char *key, const char *value);
int accel_options_dump(const accel_options_t *options, char **out);
"""),
    ("accel/state.h", """
typedef struct accel_state accel_state_t;
#define ACCEL_DISTRIBUTED_NO 0
#define ACCEL_DISTRIBUTED_MULTI_CPU 1
#define ACCEL_DISTRIBUTED_MULTI_GPU 2
int accel_state_new(accel_state_t **out, const accel_options_t *options);
void accel_state_free(accel_state_t *state);
int accel_state_shutdown(accel_state_t *state);
int accel_state_reset(accel_state_t *state);
int accel_state_wait_for_everyone(accel_state_t *state);
int accel_state_set_seed(accel_state_t *state, uint64_t seed, int device_specific);
int32_t accel_state_num_processes(const accel_state_t *state);
int32_t accel_state_process_index(const accel_state_t *state);
int32_t accel_state_local_process_index(const accel_state_t *state);
int32_t accel_state_num_local_processes(const accel_state_t *state);
int accel_state_is_main_process(const accel_state_t *state);
int accel_state_is_local_main_process(const accel_state_t *state);
int accel_state_is_last_process(const accel_state_t *state);
int accel_state_distributed_type(const accel_state_t *state);
const char *accel_state_distributed_type_name(const accel_state_t *state);
const char *accel_state_device(const accel_state_t *state);
const char *accel_state_mixed_precision(const accel_state_t *state);
const char *accel_state_backend(const accel_state_t *state);
int accel_state_is_broken(const accel_state_t *state);
"""),
    ("accel/tensor.h", """
struct DLManagedTensor;
typedef struct accel_tensor accel_tensor_t;
#define ACCEL_DTYPE_FLOAT32 1
#define ACCEL_DTYPE_FLOAT64 2
#define ACCEL_DTYPE_FLOAT16 3
#define ACCEL_DTYPE_BFLOAT16 4
#define ACCEL_DTYPE_INT8 5
#define ACCEL_DTYPE_INT16 6
#define ACCEL_DTYPE_INT32 7
#define ACCEL_DTYPE_INT64 8
#define ACCEL_DTYPE_UINT8 9
#define ACCEL_DTYPE_BOOL 10
#define ACCEL_TENSOR_MAX_DIMS 64
int accel_tensor_from_dlpack(accel_tensor_t **out, struct DLManagedTensor *managed);
int accel_tensor_to_dlpack(struct DLManagedTensor **out, const accel_tensor_t *tensor);
int accel_tensor_from_buffer(accel_tensor_t **out, const void *data, int32_t dtype, const int64_t *shape, size_t ndim);
void accel_tensor_free(accel_tensor_t *tensor);
size_t accel_tensor_ndim(const accel_tensor_t *tensor);
const int64_t *accel_tensor_shape(const accel_tensor_t *tensor);
int64_t accel_tensor_numel(const accel_tensor_t *tensor);
int32_t accel_tensor_dtype(const accel_tensor_t *tensor);
size_t accel_tensor_element_size(const accel_tensor_t *tensor);
const char *accel_tensor_device(const accel_tensor_t *tensor);
int accel_tensor_data(const accel_tensor_t *tensor, void **out);
int accel_tensor_copy_to_buffer(const accel_tensor_t *tensor, void *dst, size_t capacity);
"""),
    ("accel/collectives.h", """
typedef struct accel_bytes_list accel_bytes_list_t;
int accel_state_gather(accel_state_t *state, const accel_tensor_t *input, accel_tensor_t **out);
int accel_state_gather_bytes(accel_state_t *state, const void *data, size_t size, accel_bytes_list_t **out);
size_t accel_bytes_list_count(const accel_bytes_list_t *list);
int accel_bytes_list_get(const accel_bytes_list_t *list, size_t index, const void **data, size_t *size);
void accel_bytes_list_free(accel_bytes_list_t *list);
int accel_state_reduce(accel_state_t *state, const accel_tensor_t *input, const char *reduction, accel_tensor_t **out);
int accel_state_reduce_named(accel_state_t *state, const char *const *names, accel_tensor_t *const *inputs, size_t count, const char *reduction, accel_tensor_t **outputs);
int accel_state_broadcast(accel_state_t *state, accel_tensor_t *tensor, int32_t from_process);
int accel_state_reduce_scatter(accel_state_t *state, const accel_tensor_t *input, const char *reduction, accel_tensor_t *output);
int accel_state_all_gather(accel_state_t *state, const accel_tensor_t *input, accel_tensor_t *output);
int accel_state_pad_across_processes(accel_state_t *state, const accel_tensor_t *input, int64_t dim, double pad_value, int pad_first, accel_tensor_t **out);
int accel_state_gather_for_metrics(accel_state_t *state, const accel_tensor_t *input, accel_tensor_t **out);
"""),
    ("accel/processes.h", """
int accel_state_split_range(const accel_state_t *state, int64_t length, int64_t *first, int64_t *count, int64_t *padded_count);
int accel_state_split_tensor(const accel_state_t *state, const accel_tensor_t *input, int apply_padding, accel_tensor_t **out);
int accel_state_main_process_first_begin(accel_state_t *state);
int accel_state_main_process_first_end(accel_state_t *state);
int accel_state_local_main_process_first_begin(accel_state_t *state);
int accel_state_local_main_process_first_end(accel_state_t *state);
int accel_state_send_to_device(const accel_state_t *state, const accel_tensor_t *input, int non_blocking, accel_tensor_t **out);
"""),
    ("accel/loader.h", """
typedef struct accel_dataset accel_dataset_t;
typedef struct accel_loader accel_loader_t;
typedef struct accel_batch accel_batch_t;
typedef struct accel_sample accel_sample_t;
int accel_dataset_from_tensors(accel_dataset_t **out, const char *const *names, accel_tensor_t *const *tensors, size_t count);
typedef int (*accel_get_item_fn)(int64_t index, accel_sample_t *sample, void *payload);
int accel_dataset_from_callback(accel_dataset_t **out, int64_t length, accel_get_item_fn get_item, void *payload);
int accel_sample_add(accel_sample_t *sample, const char *name, const accel_tensor_t *tensor);
typedef int (*accel_start_epoch_fn)(int64_t epoch, void *payload);
typedef int (*accel_next_item_fn)(accel_sample_t *sample, int *end, void *payload);
int accel_dataset_from_iterable(accel_dataset_t **out, accel_start_epoch_fn start_epoch, accel_next_item_fn next_item, void *payload);
int accel_dataset_from_safetensors(accel_dataset_t **out, const char *path);
int accel_dataset_from_npy(accel_dataset_t **out, const char *const *names, const char *const *paths, size_t count);
int64_t accel_dataset_length(const accel_dataset_t *dataset);
void accel_dataset_free(accel_dataset_t *dataset);
int accel_loader_new(accel_loader_t **out, accel_state_t *state, accel_dataset_t *dataset, const accel_options_t *options);
int accel_loader_new_with_batches(accel_loader_t **out, accel_state_t *state, accel_dataset_t *dataset, const int64_t *indices, const size_t *batch_sizes, size_t num_batches, const accel_options_t *options);
void accel_loader_free(accel_loader_t *loader);
int accel_loader_next(accel_loader_t *loader, accel_batch_t **out);
int accel_loader_length(const accel_loader_t *loader, int64_t *out);
int accel_loader_end_of_dataloader(const accel_loader_t *loader);
int64_t accel_loader_remainder(const accel_loader_t *loader);
int64_t accel_loader_epoch(const accel_loader_t *loader);
int accel_loader_set_epoch(accel_loader_t *loader, int64_t epoch);
int accel_loader_skip_first_batches(accel_loader_t *loader, int64_t n);
int accel_loader_save_state(accel_loader_t *loader, const void **data, size_t *size);
int accel_loader_load_state(accel_loader_t *loader, const void *data, size_t size);
size_t accel_batch_count(const accel_batch_t *batch);
const char *accel_batch_name(const accel_batch_t *batch, size_t index);
int accel_batch_get(const accel_batch_t *batch, const char *name, accel_tensor_t **out);
void accel_batch_free(accel_batch_t *batch);
"""),
    ("accel/loss.h", """
int accel_loss_compute(accel_tensor_t **out, const char *name, const accel_tensor_t *input, const accel_tensor_t *target, const accel_options_t *options);
"""),
    ("accel/model.h", """
typedef struct accel_model accel_model_t;
typedef struct accel_output accel_output_t;
int accel_model_load(accel_model_t **out, const char *path);
int accel_model_load_buffer(accel_model_t **out, const void *data, size_t size);
int accel_model_from_tensors(accel_model_t **out, const char *const *names, accel_tensor_t *const *parameters, const int *trainable, size_t count, const char *const *buffer_names, accel_tensor_t *const *buffers, size_t buffer_count);
void accel_model_free(accel_model_t *model);
int accel_state_prepare_model(accel_state_t *state, accel_model_t *model, const accel_options_t *options);
int accel_model_forward(accel_model_t *model, accel_tensor_t *const *inputs, size_t count, const char *const *names, accel_tensor_t *const *named_inputs, size_t named_count, accel_output_t **out);
int accel_model_evaluate(accel_model_t *model, accel_tensor_t *const *inputs, size_t count, const char *const *names, accel_tensor_t *const *named_inputs, size_t named_count, accel_output_t **out);
int accel_model_begin_forward(accel_model_t *model, int grad_enabled);
int accel_model_grad_view(const accel_model_t *model, size_t index, accel_tensor_t **out);
int accel_model_grad_ready(accel_model_t *model, size_t index);
int accel_model_end_backward(accel_model_t *model);
int accel_model_grad_reached_by_no_rank(const accel_model_t *model, size_t index, int *out);
size_t accel_output_count(const accel_output_t *output);
const char *accel_output_name(const accel_output_t *output, size_t index);
int accel_output_get(const accel_output_t *output, size_t index, accel_tensor_t **out);
int accel_output_get_named(const accel_output_t *output, const char *name, accel_tensor_t **out);
void accel_output_free(accel_output_t *output);
int accel_model_train(accel_model_t *model, int on);
int accel_model_is_training(const accel_model_t *model);
size_t accel_model_num_parameters(const accel_model_t *model);
const char *accel_model_parameter_name(const accel_model_t *model, size_t index);
int accel_model_parameter(const accel_model_t *model, size_t index, accel_tensor_t **out);
size_t accel_model_num_buffers(const accel_model_t *model);
const char *accel_model_buffer_name(const accel_model_t *model, size_t index);
int accel_model_buffer(const accel_model_t *model, size_t index, accel_tensor_t **out);
int accel_model_grad_sync_stat(const accel_model_t *model, const char *name, double *out);
int accel_model_unwrap(const accel_model_t *model, accel_model_t **out);
int accel_model_save_torchscript(const accel_model_t *model, const char *path);
int accel_model_load_weights(accel_model_t *model, const char *directory);
"""),
    ("accel/optimizer.h", """
typedef struct accel_optimizer accel_optimizer_t;
int accel_optimizer_new(accel_optimizer_t **out, accel_model_t *model, const char *kind, const accel_options_t *options);
void accel_optimizer_free(accel_optimizer_t *optimizer);
int accel_optimizer_step(accel_optimizer_t *optimizer);
int accel_optimizer_zero_grad(accel_optimizer_t *optimizer);
int accel_optimizer_step_was_skipped(const accel_optimizer_t *optimizer);
size_t accel_optimizer_num_groups(const accel_optimizer_t *optimizer);
int accel_optimizer_lr(const accel_optimizer_t *optimizer, size_t group, double *out);
int accel_optimizer_set_lr(accel_optimizer_t *optimizer, size_t group, double lr);
int accel_optimizer_momentum(const accel_optimizer_t *optimizer, size_t group, double *out);
int accel_optimizer_betas(const accel_optimizer_t *optimizer, size_t group, double *beta1, double *beta2);
int accel_optimizer_loss_scale(const accel_optimizer_t *optimizer, double *out);
"""),
    ("accel/scheduler.h", """
typedef struct accel_scheduler accel_scheduler_t;
int accel_scheduler_new(accel_scheduler_t **out, accel_optimizer_t *optimizer, const char *name, const accel_options_t *options);
typedef int (*accel_lr_multiplier_fn)(int64_t step, double *multiplier, void *payload);
int accel_scheduler_from_callback(accel_scheduler_t **out, accel_optimizer_t *optimizer, accel_lr_multiplier_fn multiplier, void *payload);
void accel_scheduler_free(accel_scheduler_t *scheduler);
int accel_scheduler_step(accel_scheduler_t *scheduler);
int accel_scheduler_step_with_metric(accel_scheduler_t *scheduler, double metric);
int accel_scheduler_last_lr(const accel_scheduler_t *scheduler, size_t group, double *out);
int64_t accel_scheduler_step_count(const accel_scheduler_t *scheduler);
"""),
    ("accel/train.h", """
int accel_state_accumulate(accel_state_t *state);
int accel_state_sync_gradients(const accel_state_t *state);
int64_t accel_state_gradient_accumulation_steps(const accel_state_t *state);
int accel_state_backward(accel_state_t *state, const accel_tensor_t *loss);
int accel_state_backward_with_items(accel_state_t *state, const accel_tensor_t *loss, size_t num_items);
int accel_state_no_sync_begin(accel_state_t *state, accel_model_t *model);
int accel_state_no_sync_end(accel_state_t *state, accel_model_t *model);
int accel_state_autocast_begin(accel_state_t *state);
int accel_state_autocast_end(accel_state_t *state);
int accel_state_free_memory(accel_state_t *state);
int accel_state_grad_scale(accel_state_t *state, accel_tensor_t **out);
int accel_state_unscale_gradients(accel_state_t *state, accel_model_t *model, int *found_inf);
int accel_state_update_grad_scale(accel_state_t *state, int found_inf);
int accel_state_clip_grad_norm(accel_state_t *state, accel_model_t *model, double max_norm, double norm_type, double *total_norm);
int accel_state_clip_grad_value(accel_state_t *state, accel_model_t *model, double clip_value);
int accel_state_save_model(accel_state_t *state, const accel_model_t *model, const char *directory, size_t max_shard_size);
"""),
    ("accel/train_step.h", """
typedef struct accel_train_step accel_train_step_t;
int accel_train_step_new(accel_train_step_t **out, accel_model_t *model, accel_optimizer_t *optimizer, const accel_options_t *options);
void accel_train_step_free(accel_train_step_t *step);
int accel_train_step_run(accel_train_step_t *step, accel_tensor_t *const *inputs, size_t count, const char *const *names, accel_tensor_t *const *named_inputs, size_t named_count, const accel_tensor_t *target, accel_tensor_t **loss);
const char *accel_train_step_eager_reason(const accel_train_step_t *step);
int accel_train_step_stat(const accel_train_step_t *step, const char *name, double *out);
"""),
    ("accel/tracking.h", """
typedef struct accel_progress accel_progress_t;
int accel_state_init_trackers(accel_state_t *state, const char *project_dir, const char *run_name, const char *config_json, const accel_options_t *options);
int accel_state_log(accel_state_t *state, const char *const *names, const double *values, size_t count, int64_t step);
int accel_state_finish_trackers(accel_state_t *state);
int accel_state_print(const accel_state_t *state, const char *text);
int accel_progress_new(accel_progress_t **out, const accel_state_t *state, int64_t total, const char *description);
int accel_progress_update(accel_progress_t *progress, int64_t steps, double loss);
void accel_progress_free(accel_progress_t *progress);
"""),
    ("accel/checkpoint.h", """
typedef struct accel_sink accel_sink_t;
int accel_sink_write(accel_sink_t *sink, const void *data, size_t size);
typedef int (*accel_save_object_fn)(accel_sink_t *sink, void *payload);
typedef int (*accel_load_object_fn)(const void *data, size_t size, void *payload);
int accel_state_register_for_checkpointing(accel_state_t *state, const char *name, accel_save_object_fn save, accel_load_object_fn load, void *payload);
int accel_state_save_state(accel_state_t *state, const char *directory, accel_model_t *const *models, size_t num_models, accel_optimizer_t *const *optimizers, size_t num_optimizers, accel_scheduler_t *const *schedulers, size_t num_schedulers, accel_loader_t *const *loaders, size_t num_loaders);
int accel_state_save_state_async(accel_state_t *state, const char *directory, accel_model_t *const *models, size_t num_models, accel_optimizer_t *const *optimizers, size_t num_optimizers, accel_scheduler_t *const *schedulers, size_t num_schedulers, accel_loader_t *const *loaders, size_t num_loaders);
int accel_state_wait_for_save(accel_state_t *state);
int accel_state_load_state(accel_state_t *state, const char *directory, accel_model_t *const *models, size_t num_models, accel_optimizer_t *const *optimizers, size_t num_optimizers, accel_scheduler_t *const *schedulers, size_t num_schedulers, accel_loader_t *const *loaders, size_t num_loaders);
int64_t accel_state_checkpoint_iteration(const accel_state_t *state);
int accel_state_set_checkpoint_iteration(accel_state_t *state, int64_t iteration);
"""),
    ("ATen/dlpack.h", """
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int device_id;
} DLDevice;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
"""),
)

CDEF = "\n".join(text for _, text in SECTIONS)
