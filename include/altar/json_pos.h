/* altar — where a JSON syntax error really is, for people reading the message.
 * A parser notices a trailing comma only at the token after it, often on
 * the next line; this points at the comma instead. */
#ifndef ALTAR_JSON_POS_H
#define ALTAR_JSON_POS_H

#include <stdbool.h>
#include <stddef.h>

/* Given the byte offset pos at which a parser stopped in text (len bytes),
 * fills *pline and *pcol (1-based) of the error. When the last
 * non-blank byte before pos is a comma and pos is at '}' or ']', the
 * position is the comma's and *ptrailing_comma is true. */
void altar_json_error_position(const char *text, size_t len, size_t pos, int *pline, int *pcol, bool *ptrailing_comma);

#endif
