#pragma once
// KvStorage: the K/V memory of every block, for every layer. Bookkeeping (which block belongs to whom) lives
// in the `kv` layer; this class only holds the bytes and hands out rows by (layer, block, slot).
//
// Layout, per layer and per K/V:  [block][kv head][slot][head slice in the K or V dtype]
// Layers may differ in KV heads and head size (KvShape::layers, Gemma 4); each layer's rows have its own size.
// so one token's K for all heads is one contiguous row, quantized straight from the K projection output.
// With window slabs (a model's sliding-window layers, kv/block_pool.h), those layers' planes hold num_window_slabs
// slabs instead of num_blocks blocks, and are addressed by slab id: the caller passes a block's slab for them.
// The pool is one allocation of exactly bytes_total() bytes, scales included; its pages are committed by the
// OS as blocks are first written, so a process's memory grows with the KV it really holds, up to the budget.
// It is offered for transparent huge pages (util/huge_pages.h), so it grows in 2 MiB steps of each layer's K and V
// planes where the kernel takes the advice. A decode step at depth reads every layer's K/V, thousands of 4 KiB pages
// (more than the TLB holds), and a request that writes new blocks takes a page fault per 4 KiB page it first
// touches; on 2 MiB pages decode at depth and later turns run faster (docs/performance-log.md has the pairs).
// In a server, the engine's KvPrefaulter
// (engine/kv_prefault.h) commits the next 2 MiB of each plane ahead of use through commit_blocks.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "tensor/kv_dtype.h"
#include "util/huge_pages.h"
#include "util/ids.h"
#include "util/kv_shape.h"
#include "util/result.h"

namespace hearth {

class KvStorage {
 public:
  // Error when a dtype cannot hold this head size, or the shape is not positive.
  // `window_layers` (empty, or one flag per layer) marks the layers held in `num_window_slabs` slabs.
  static Result<std::unique_ptr<KvStorage>> create(const KvShape& shape, const KvFormat& format, int32_t block_size,
                                                   int32_t num_blocks, std::vector<bool> window_layers = {},
                                                   int32_t num_window_slabs = 0);
  // f32 K and V; aborts on a bad shape (tests and single-sequence generation).
  KvStorage(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_blocks);
  KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_window_slabs() const { return num_window_slabs_; }
  // Whether `layer` lives in window slabs (its rows are addressed by a block's slab).
  bool windowed(int32_t layer) const { return !window_layers_.empty() && window_layers_[layer]; }
  const KvShape& shape() const { return shape_; }
  const KvFormat& format() const { return format_; }
  // One token's K (kv == 0) or V row of `layer`, and the smallest of them over the layers.
  size_t row_bytes(int32_t layer, int kv) const { return kv == 0 ? planes_[layer].k_row : planes_[layer].v_row; }
  size_t row_bytes(int kv) const;
  // Every layer's K and V of one token / one block (what a lower tier stores per block).
  size_t bytes_per_token() const { return bytes_per_token_; }
  size_t bytes_per_block() const { return bytes_per_token() * block_size_; }
  size_t bytes_total() const { return bytes_total_; }

  // Stores one token's K (kv == 0) or V (kv == 1) row of kv_dim floats, converted to the storage dtype. `block` is
  // a slab id on a windowed layer (so below).
  void store_row(int32_t layer, int kv, BlockId block, int32_t slot, const float* row);
  // The stored bytes of one token's slice of KV head `head` (kv_head_bytes long). Requires block < the layer's plane
  // (num_blocks() or num_window_slabs()), slot < block_size(), head < n_kv_heads.
  const uint8_t* head_slice(int32_t layer, int kv, BlockId block, int32_t slot, int32_t head) const;

  // The K (kv == 0) or V (kv == 1) rows of `layer` as a paged view through `block_table`.
  PagedKvView layer_view(int32_t layer, int kv, std::span<const BlockId> block_table) const;

  // Copies the first `n_slots` token slots of `src` into `dst`, in every layer (copy-on-partial-reuse); the
  // windowed layers' from `src_slab` into `dst_slab` (required with window slabs).
  void copy_slots(BlockId dst, BlockId src, int32_t n_slots, BlockId dst_slab = BlockId{-1},
                  BlockId src_slab = BlockId{-1});

  // Commits the pages that blocks [begin, end) occupy in every layer's K and V plane (window slabs excluded) as a
  // write would, without changing a byte (util/huge_pages.h's commit_by_touching), so writing those blocks later
  // takes no page fault. Safe while other threads read or write any block. Requires 0 <= begin <= end <=
  // num_blocks().
  void commit_blocks(int32_t begin, int32_t end);

  // One block's K/V as bytes_per_block() bytes, layer by layer, K then V, each head by head, each head's slots in
  // order (the pool's own layout; what a lower tier stores), and
  // back. `out`/`bytes` must be exactly bytes_per_block() long. The windowed layers are read from `slab` (required
  // with window slabs) and written to it (skipped when it is -1: the block then holds the other layers only).
  void read_block(BlockId block, std::span<uint8_t> out, BlockId slab = BlockId{-1}) const;
  void write_block(BlockId block, std::span<const uint8_t> bytes, BlockId slab = BlockId{-1});
  // How read_block lays a block out, as text a tier entry carries: blocks are interchangeable only when it is equal.
  std::string block_layout() const;

  // Hybrid models (ModelConfig::is_hybrid): `n_slots` recurrent-state slots of `floats_per_slot` floats each
  // (ModelConfig::recurrent_state_floats()), zeroed, replacing any held before. A batch sequence names its slot
  // (BatchSequence::state_slot); what a slot must hold between forwards is Model::forward's contract.
  void reserve_state_slots(int32_t n_slots, int64_t floats_per_slot);
  int32_t num_state_slots() const { return num_state_slots_; }
  int64_t state_floats_per_slot() const { return state_floats_per_slot_; }
  size_t state_bytes_total() const { return state_.size() * sizeof(float); }
  // Slot `slot`'s floats. Requires 0 <= slot < num_state_slots().
  float* state_slot(int32_t slot);
  const float* state_slot(int32_t slot) const;

 private:
  KvStorage(const KvShape& shape, const KvFormat& format, int32_t block_size, int32_t num_blocks,
            std::vector<bool> window_layers, int32_t num_window_slabs);
  // Where a block starts, and where one token's slice of one head sits in it.
  size_t block_offset(int32_t layer, int kv, BlockId block) const;
  size_t slice_offset(int32_t layer, int kv, BlockId block, int32_t slot, int32_t head) const;
  size_t head_bytes(int32_t layer, int kv) const {
    return row_bytes(layer, kv) / static_cast<size_t>(planes_[layer].n_kv_heads);
  }
  size_t plane_offset(int32_t layer, int kv) const;
  int32_t plane_blocks(int32_t layer) const { return windowed(layer) ? num_window_slabs_ : num_blocks_; }

  KvShape shape_;
  KvFormat format_;
  int32_t block_size_;
  int32_t num_blocks_;
  std::vector<bool> window_layers_;
  int32_t num_window_slabs_;
  struct LayerPlanes {
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    size_t k_row = 0;  // one token's K of every head
    size_t v_row = 0;
    size_t offset = 0;  // where the layer's K plane starts; its V plane follows
  };
  std::vector<LayerPlanes> planes_;
  size_t bytes_per_token_ = 0;
  size_t bytes_total_ = 0;
  HugePagesBuffer data_;  // [layer][k|v][block or slab][kv head][slot][head bytes]
  int32_t num_state_slots_ = 0;
  int64_t state_floats_per_slot_ = 0;
  std::vector<float> state_;  // [slot][state_floats_per_slot]
};

}  // namespace hearth
