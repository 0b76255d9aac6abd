#include "model/kv_storage.h"

#include "kernels/kv_convert.h"

#include <algorithm>
#include <cstdint>

#include <cstring>
#include <new>

namespace hearth {

Result<std::unique_ptr<KvStorage>> KvStorage::create(const KvShape& shape, const KvFormat& format, int32_t block_size,
                                                     int32_t num_blocks, std::vector<bool> window_layers,
                                                     int32_t num_window_slabs) {
  if (shape.n_layers < 1 || shape.n_kv_heads < 1 || shape.head_dim < 1 || block_size < 1 || num_blocks < 1) {
    return make_error("bad KV shape: {} layers, {} KV heads, head size {}, {} blocks of {}", shape.n_layers,
                      shape.n_kv_heads, shape.head_dim, num_blocks, block_size);
  }
  if (!window_layers.empty() &&
      (static_cast<int32_t>(window_layers.size()) != shape.n_layers || num_window_slabs < 1)) {
    return make_error("window slabs: {} layer flags for {} layers, {} slabs", window_layers.size(), shape.n_layers,
                      num_window_slabs);
  }
  if (!shape.uniform() && static_cast<int32_t>(shape.layers.size()) != shape.n_layers) {
    return make_error("bad KV shape: {} layer shapes for {} layers", shape.layers.size(), shape.n_layers);
  }
  for (int32_t il = 0; il < shape.n_layers; ++il) {
    const KvLayerShape l = shape.layer(il);
    if (l.n_kv_heads < 1 || l.head_dim < 1) {
      return make_error("bad KV shape: layer {} has {} KV heads of {}", il, l.n_kv_heads, l.head_dim);
    }
    HEARTH_TRY(kv_group_size(format.k, l.head_dim));
    HEARTH_TRY(kv_group_size(format.v, l.head_dim));
  }
  try {
    return std::unique_ptr<KvStorage>(
        new KvStorage(shape, format, block_size, num_blocks, std::move(window_layers), num_window_slabs));
  } catch (const std::bad_alloc&) {
    const size_t bytes = static_cast<size_t>(shape.n_layers) * shape.n_kv_heads *
                         (kv_head_bytes(format.k, shape.head_dim) + kv_head_bytes(format.v, shape.head_dim)) *
                         block_size * num_blocks;
    return make_error("cannot allocate the KV pool of {} bytes", bytes);
  }
}

KvStorage::KvStorage(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size, int32_t num_blocks)
    : KvStorage(KvShape{n_layers, n_kv_heads, head_dim}, KvFormat{}, block_size, num_blocks, {}, 0) {}

KvStorage::KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks)
    : KvStorage(shape, KvFormat{}, block_size, num_blocks, {}, 0) {}

KvStorage::KvStorage(const KvShape& shape, const KvFormat& format, int32_t block_size, int32_t num_blocks,
                     std::vector<bool> window_layers, int32_t num_window_slabs)
    : shape_(shape),
      format_(format),
      block_size_(block_size),
      num_blocks_(num_blocks),
      window_layers_(std::move(window_layers)),
      num_window_slabs_(window_layers_.empty() ? 0 : num_window_slabs) {
  HEARTH_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 && block_size > 0 && num_blocks > 0 &&
                   (window_layers_.empty() ||
                    (static_cast<int32_t>(window_layers_.size()) == shape.n_layers && num_window_slabs_ > 0)),
               "bad KvStorage shape");
  HEARTH_CHECK(shape.uniform() || static_cast<int32_t>(shape.layers.size()) == shape.n_layers, "bad KvStorage shape");
  for (int32_t layer = 0; layer < shape.n_layers; ++layer) {
    const KvLayerShape l = shape.layer(layer);
    HEARTH_CHECK(l.n_kv_heads > 0 && l.head_dim > 0, "bad KvStorage shape of layer {}", layer);
    LayerPlanes p{l.n_kv_heads, l.head_dim, kv_head_bytes(format.k, l.head_dim) * l.n_kv_heads,
                  kv_head_bytes(format.v, l.head_dim) * l.n_kv_heads, bytes_total_};
    bytes_total_ += (p.k_row + p.v_row) * block_size_ * static_cast<size_t>(plane_blocks(layer));
    bytes_per_token_ += p.k_row + p.v_row;
    planes_.push_back(p);
  }
  // Not value-initialized: the pages stay uncommitted until a block is written, and only written slots are read.
  data_ = allocate_on_huge_pages(bytes_total_);
  if (data_ == nullptr) throw std::bad_alloc();
}

size_t KvStorage::row_bytes(int kv) const {
  size_t smallest = SIZE_MAX;
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer) smallest = std::min(smallest, row_bytes(layer, kv));
  return smallest;
}

size_t KvStorage::plane_offset(int32_t layer, int kv) const {
  const LayerPlanes& p = planes_[layer];
  return p.offset + (kv == 0 ? 0 : p.k_row * block_size_ * static_cast<size_t>(plane_blocks(layer)));
}

size_t KvStorage::block_offset(int32_t layer, int kv, BlockId block) const {
  HEARTH_CHECK(layer >= 0 && layer < shape_.n_layers && block.value >= 0 && block.value < plane_blocks(layer),
               "KV access out of range: layer {} block {}", layer, block.value);
  return plane_offset(layer, kv) + static_cast<size_t>(block.value) * block_size_ * row_bytes(layer, kv);
}

void KvStorage::commit_blocks(int32_t begin, int32_t end) {
  HEARTH_CHECK(begin >= 0 && begin <= end && end <= num_blocks_, "commit_blocks [{}, {}) of {} blocks", begin, end,
               num_blocks_);
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer) {
    if (windowed(layer)) continue;
    for (int kv = 0; kv < 2; ++kv) {
      const size_t block_bytes = row_bytes(layer, kv) * block_size_;
      commit_by_touching(data_.get() + plane_offset(layer, kv) + static_cast<size_t>(begin) * block_bytes,
                         static_cast<size_t>(end - begin) * block_bytes);
    }
  }
}

size_t KvStorage::slice_offset(int32_t layer, int kv, BlockId block, int32_t slot, int32_t head) const {
  HEARTH_CHECK(slot >= 0 && slot < block_size_ && head >= 0 && head < planes_[layer].n_kv_heads,
               "KV access out of range: slot {} head {}", slot, head);
  const size_t hb = head_bytes(layer, kv);
  return block_offset(layer, kv, block) + (static_cast<size_t>(head) * block_size_ + slot) * hb;
}

void KvStorage::store_row(int32_t layer, int kv, BlockId block, int32_t slot, const float* row) {
  const KvDtype type = kv == 0 ? format_.k : format_.v;
  const LayerPlanes& p = planes_[layer];
  for (int32_t h = 0; h < p.n_kv_heads; ++h) {
    kv_store_head(type, row + static_cast<size_t>(h) * p.head_dim,
                  data_.get() + slice_offset(layer, kv, block, slot, h), p.head_dim);
  }
}

const uint8_t* KvStorage::head_slice(int32_t layer, int kv, BlockId block, int32_t slot, int32_t head) const {
  return data_.get() + slice_offset(layer, kv, block, slot, head);
}

PagedKvView KvStorage::layer_view(int32_t layer, int kv, std::span<const BlockId> block_table) const {
  const size_t hb = head_bytes(layer, kv);
  return PagedKvView{data_.get() + plane_offset(layer, kv),
                     row_bytes(layer, kv) * block_size_,
                     hb,
                     block_size_,
                     block_table,
                     kv == 0 ? format_.k : format_.v,
                     hb,
                     hb * block_size_};
}

void KvStorage::copy_slots(BlockId dst, BlockId src, int32_t n_slots, BlockId dst_slab, BlockId src_slab) {
  HEARTH_CHECK(n_slots >= 0 && n_slots <= block_size_, "copy_slots: {} slots", n_slots);
  if (n_slots == 0) return;
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer) {
    const BlockId to = windowed(layer) ? dst_slab : dst;
    const BlockId from = windowed(layer) ? src_slab : src;
    for (int kv = 0; kv < 2; ++kv) {
      for (int32_t h = 0; h < planes_[layer].n_kv_heads; ++h) {
        std::memcpy(data_.get() + slice_offset(layer, kv, to, 0, h), data_.get() + slice_offset(layer, kv, from, 0, h),
                    static_cast<size_t>(n_slots) * head_bytes(layer, kv));
      }
    }
  }
}

void KvStorage::read_block(BlockId block, std::span<uint8_t> out, BlockId slab) const {
  HEARTH_CHECK(out.size() == bytes_per_block(), "read_block into {} bytes, a block is {}", out.size(),
               bytes_per_block());
  uint8_t* dst = out.data();
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer) {
    const BlockId from = windowed(layer) ? slab : block;
    for (int kv = 0; kv < 2; ++kv) {
      const size_t n = static_cast<size_t>(block_size_) * row_bytes(layer, kv);
      std::memcpy(dst, data_.get() + block_offset(layer, kv, from), n);
      dst += n;
    }
  }
}

void KvStorage::write_block(BlockId block, std::span<const uint8_t> bytes, BlockId slab) {
  HEARTH_CHECK(bytes.size() == bytes_per_block(), "write_block of {} bytes, a block is {}", bytes.size(),
               bytes_per_block());
  const uint8_t* src = bytes.data();
  for (int32_t layer = 0; layer < shape_.n_layers; ++layer) {
    const BlockId to = windowed(layer) ? slab : block;
    for (int kv = 0; kv < 2; ++kv) {
      const size_t n = static_cast<size_t>(block_size_) * row_bytes(layer, kv);
      if (to.value < 0) {  // a windowed layer without a slab: not kept
        src += n;
        continue;
      }
      std::memcpy(data_.get() + block_offset(layer, kv, to), src, n);
      src += n;
    }
  }
}

std::string KvStorage::block_layout() const {
  std::string layout = fmt::format(
      "hearth-kv-block-v2 layers={} kv_heads={} head_dim={} block_size={} k={} v={} k_row={} v_row={} "
      "order=layer,k|v,head,slot",
      shape_.n_layers, shape_.n_kv_heads, shape_.head_dim, block_size_, kv_dtype_name(format_.k),
      kv_dtype_name(format_.v), planes_[0].k_row, planes_[0].v_row);
  if (!shape_.uniform()) {  // layers of other sizes (Gemma 4): each layer's heads and head size
    layout += " layer_shapes=";
    for (const LayerPlanes& p : planes_) layout += fmt::format("{}x{},", p.n_kv_heads, p.head_dim);
    layout.pop_back();
  }
  return layout;
}

void KvStorage::reserve_state_slots(int32_t n_slots, int64_t floats_per_slot) {
  HEARTH_CHECK(n_slots >= 0 && floats_per_slot >= 0, "bad recurrent state slots ({} of {} floats)", n_slots,
               floats_per_slot);
  num_state_slots_ = n_slots;
  state_floats_per_slot_ = floats_per_slot;
  state_.assign(static_cast<size_t>(n_slots) * static_cast<size_t>(floats_per_slot), 0.0f);
}

float* KvStorage::state_slot(int32_t slot) {
  HEARTH_CHECK(slot >= 0 && slot < num_state_slots_, "recurrent state slot {} out of range [0, {})", slot,
               num_state_slots_);
  return state_.data() + static_cast<size_t>(slot) * static_cast<size_t>(state_floats_per_slot_);
}

const float* KvStorage::state_slot(int32_t slot) const {
  return const_cast<KvStorage*>(this)->state_slot(slot);
}

}  // namespace hearth
