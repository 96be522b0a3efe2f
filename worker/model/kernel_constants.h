// The constants of the model's formulas (kernels.h), shared by the CPU and
// CUDA backends so they cannot drift apart. Plain constexpr, no other
// header: nvcc compiles it into the .cu kernels.
#pragma once

namespace zeroshard {

constexpr float kLayerNormEps = 1e-5f;             // GPT-2's LayerNorm epsilon.
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi), GELU's tanh form.
constexpr float kGeluCubic = 0.044715f;            // The cubic term of GELU's tanh form.
// The target id of a position the loss does not count: a prompt token of
// fine-tuning data, padding (kernels.h's cross entropy; PyTorch's
// ignore_index, there -100).
constexpr int kIgnoreTarget = -1;

}  // namespace zeroshard
