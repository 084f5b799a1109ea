// Asserts that a piece of core code throws accel::Error with a given code and message fragment.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace accel {

template <typename F>
void expect_error(Code code, const std::string& fragment, F&& body) {
  try {
    body();
    ADD_FAILURE() << "expected an accel::Error containing '" << fragment << "'";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

}  // namespace accel
