/* Line and column of a JSON syntax error, moved back onto a trailing comma. */
#include "altar/json_pos.h"

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void altar_json_error_position(const char *text, size_t len, size_t pos, int *pline, int *pcol, bool *ptrailing_comma) {
  if (pos > len) pos = len;
  /* jansson's position is just past the token it rejected: step onto it. */
  size_t at = pos;
  while (at > 0 && blank(text[at - 1])) at--;
  if (at > 0 && (text[at - 1] == '}' || text[at - 1] == ']')) at--;
  size_t back = at;
  while (back > 0 && blank(text[back - 1])) back--;
  *ptrailing_comma = at < len && (text[at] == '}' || text[at] == ']') && back > 0 && text[back - 1] == ',';
  if (*ptrailing_comma) at = back - 1;
  int line = 1, col = 1;
  for (size_t i = 0; i < at; i++) {
    if (text[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  *pline = line;
  *pcol = col;
}
