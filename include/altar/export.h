/* altar — what the shared library exports. Everything is compiled with
 * hidden visibility; each public header wraps its declarations in
 * ALTAR_API_BEGIN / ALTAR_API_END, so libaltar.so exports the public API and
 * nothing of the parts' internals. */
#ifndef ALTAR_EXPORT_H
#define ALTAR_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define ALTAR_API __attribute__((visibility("default")))
#define ALTAR_API_BEGIN _Pragma("GCC visibility push(default)")
#define ALTAR_API_END _Pragma("GCC visibility pop")
#else
#define ALTAR_API
#define ALTAR_API_BEGIN
#define ALTAR_API_END
#endif

#endif
