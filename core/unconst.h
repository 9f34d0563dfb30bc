/* The one way to drop const, for the places that must (the build warns on
 * every other cast that does: -Wcast-qual, CMakeLists.txt).
 *
 * Use it only where the pointer is never written through:
 * - a C library's signature lacks a const it does not need: exec and
 *   posix_spawn argv, struct iovec's iov_base for a write, jansson's
 *   json_object_foreach on a const object, libmicrohttpd's buffer with
 *   MHD_RESPMEM_MUST_COPY, librdkafka's rd_kafka_vu_t and conf dump;
 * - one of altar's own structs, whose string fields are owned when it is
 *   decoded and borrowed when it is filled in to be encoded, copied or
 *   looked up (altar_transfer_t, altar_status_event_t, altar_control_msg_t,
 *   ...): the borrowed copy is only read.
 *
 * As curl's CURL_UNCONST: through uintptr_t, so no qualifier is cast away
 * in the compiler's eyes; the result is a void pointer, which converts to
 * the field's type without another cast. */
#ifndef ALTAR_CORE_UNCONST_H
#define ALTAR_CORE_UNCONST_H

#include <stdint.h>

#define ALTAR__UNCONST(p) ((void *)(uintptr_t)(const void *)(p))

#endif
