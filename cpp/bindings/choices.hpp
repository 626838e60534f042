// The bindings of the kernel choices (softkmeans/choices.hpp), registered
// from module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace softkmeans_bindings {

// _kernel_choices, _set_kernel_choices, _reset_kernel_choices, _cpu.
void def_choices(pybind11::module_& m);

}  // namespace softkmeans_bindings
