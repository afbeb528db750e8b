// Torch glue shared by the families' bindings.cpp (never by kernel files): TK_CHECK, TORCH_CHECK with an
// error message assembled from strings.
//
//   TK_CHECK(C % 8 == 0, "tk layer_norm: the width must be a multiple of 8, got ", C);
//
// Numbers are formatted with std::to_string and shapes as "(16, 64)", never streamed into an ostream: on the
// H200 machine (torch 2.11) every failing TORCH_CHECK whose message streamed a number crashed the process
// with SIGSEGV (the MLP's bad-shape test and the LayerNorm C++ path's error test), while the checks whose
// messages were strings raised RuntimeError. Not understood (torch 2.14 on the CPU machine raises both);
// messages built this way raised properly there (session 5). Pieces: strings, integers, floating-point
// numbers, bool, at::ScalarType, c10::Device, c10::IntArrayRef.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <type_traits>

namespace tk_glue {

inline std::string piece(const char *s) { return s; }
inline std::string piece(const std::string &s) { return s; }
inline std::string piece(bool b) { return b ? "true" : "false"; }
inline std::string piece(at::ScalarType t) { return c10::toString(t); }
inline std::string piece(const c10::Device &d) { return d.str(); }
inline std::string piece(c10::IntArrayRef dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); i++) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + ")";
}
template <typename T>
  requires std::is_arithmetic_v<T>
std::string piece(T v) { return std::to_string(v); }

template <typename... A>
std::string msg(const A &...a) {
  std::string out;
  ((out += piece(a)), ...);
  return out;
}

}  // namespace tk_glue

#define TK_CHECK(cond, ...) TORCH_CHECK(cond, ::tk_glue::msg(__VA_ARGS__))
