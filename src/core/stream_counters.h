/* stream_counters.h — a stream's zeroed counters, for catalog kernels whose
 * threadgroups coordinate through device memory (a last-arriver count). */
#ifndef ALLOY_CORE_STREAM_COUNTERS_H
#define ALLOY_CORE_STREAM_COUNTERS_H

#include <stdint.h>

#include "alloy/array.h"
#include "alloy/device.h"

/* A uint32 array of at least `words` words on `stream` (NULL: dev's default
 * stream) that are 0 at this point of the stream's queue. The stream owns one
 * such array, made (and zero-filled on the stream) on first use or when a
 * larger one is asked for; the contract that keeps it zero is the users':
 * every kernel given it returns each word it touched to 0 before it ends.
 * *out is a new reference (alloy_array_free it after the launch). */
alloy_status alloy_stream_counters(alloy_device *dev, alloy_stream *stream, int64_t words, alloy_array **out);

/* Drops the stream's counters (alloy_stream_free). */
void alloy_stream_counters_release(alloy_stream *stream);

#endif
