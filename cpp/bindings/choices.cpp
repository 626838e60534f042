// The bindings of the kernel choices (softkmeans/choices.hpp).
#include "choices.hpp"

#include <string>

#include "softkmeans/choices.hpp"

namespace py = pybind11;

namespace softkmeans_bindings {

void def_choices(py::module_& m) {
  m.def(
      "_kernel_choices",
      [] {
        py::list out;
        for (const auto& c : softkmeans::kernel_choice_reports())
          out.append(py::make_tuple(c.name, c.value, c.source));
        return out;
      },
      "[(name, value, source)] of every kernel choice in force");
  m.def(
      "_set_kernel_choices",
      [](const std::string& spec) {
        std::string error;
        if (!softkmeans::set_kernel_choices(spec, &error)) throw py::value_error(error);
      },
      py::arg("spec"), "Applies an override in SOFTKMEANS_KERNEL_CHOICES's syntax");
  m.def("_reset_kernel_choices", &softkmeans::reset_kernel_choices,
        "The kernel choices of process start again");
  m.def(
      "_cpu",
      [] {
        const softkmeans::CpuDescription& c = softkmeans::cpu_description();
        py::dict d;
        d["vendor"] = c.vendor;
        d["family"] = c.family;
        d["model"] = c.model;
        d["avx512"] = c.avx512;
        d["avx512_bf16"] = c.avx512_bf16;
        d["amx_bf16"] = c.amx_bf16;
        d["table_name"] = c.table_name;
        d["fma512_ports"] = c.fma512_ports;
        return d;
      },
      "The running CPU as the kernel choices key it");
}

}  // namespace softkmeans_bindings
