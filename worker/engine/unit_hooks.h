// The contract between a model and whatever holds its parameters: the
// ShardedEngine in training, a plain unsharded holder in references and tests.
// The model knows units (by index, in the shard plan's order) and each unit's
// flat fp32 layout (parameter offsets from the plan); nothing else.
//
// Call order for one micro-batch: PreForward(u) ... PostForward(u) around each
// unit's use in forward, then PreBackward(u) ... PostBackward(u) around each
// unit's use in backward (reverse order). A unit may be bracketed more than
// once per pass (the tied embedding/head is used at both ends): each bracket
// is independent, and gradients from every bracket add up.
//
// Gradient rule: the model ADDS (+=) into the buffer PreBackward returns; the
// holder decides when it is zeroed, reduced and freed.
//
// Pointers stay valid only until the matching Post* call
// ([Note: gather buffer lifetime] in worker/engine). Not thread-safe: one
// training thread calls the hooks.
#pragma once

#include <cstdint>

namespace zeroshard {

struct UnitBackwardView {
  const float* params = nullptr;  // Full unit, fp32, flat layout; numel elements.
  float* grads = nullptr;         // Full unit, fp32; the model adds into it.
};

class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  virtual const float* PreForward(int unit) = 0;
  virtual void PostForward(int unit) = 0;
  virtual UnitBackwardView PreBackward(int unit) = 0;
  virtual void PostBackward(int unit) = 0;
};

}  // namespace zeroshard
