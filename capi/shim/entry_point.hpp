// What the shim files write their entry points with, named without their namespace: the exception firewall
// (shim/guard.hpp) and the handles (shim/handles.hpp). Included by capi/shim/*.cpp only.
#pragma once

#include "shim/guard.hpp"
#include "shim/handles.hpp"

using accel::capi::guarded;
using accel::capi::guarded_out;
using accel::capi::guarded_value;
using accel::capi::read_handle;
using accel::capi::release;
using accel::capi::require;
using accel::capi::settings_of;
