// Between choices.cpp (the state of the kernel choices), choices_probe.cpp
// (the probe) and dispatch.cpp (the kernel tables).
#pragma once

#include <string>
#include <vector>

#include "softkmeans/kernels.hpp"

namespace softkmeans {

// Makes the choices of this process once (the probe where it is wanted);
// kernels<T>() calls it before handing out a table.
void ensure_kernel_choices();

// Times the variants of the named choices (choices.hpp's names that are
// probed: bf16, lane_blocking) on this CPU and returns the fastest as an
// override spec ("bf16=on,lane_blocking=4x4"). Well under a second.
std::string probe_kernel_choices(const std::vector<std::string>& names);

// The probe sets a variant for the kernels it times (choices.cpp).
void set_probe_choice(const std::string& spec);

// The float table the probe times (dispatch.cpp): the best level's, or the
// one with the bf16 pass; nullptr where that is not available.
const Kernels<float>* probe_float_kernels(bool bf16);

}  // namespace softkmeans
