// The bindings of the bf16 candidate pass (softkmeans/bf16.hpp), registered
// from module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace softkmeans_bindings {

// _bf16_available, _bf16_enabled, _set_bf16_enabled, _bf16_distance_bounds;
// _amx_available, _amx_distances, _amx_sq_slack.
void def_bf16(pybind11::module_& m);

}  // namespace softkmeans_bindings
