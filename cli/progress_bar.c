/* Progress line sized to the terminal: a bar that wraps on a narrow
 * terminal prints a trail of lines instead of redrawing one. */
#include "progress_bar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define MIN_BAR 5
#define MAX_BAR 40

int altar_cli_terminal_columns(int fd) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  const char *c = getenv("COLUMNS");
  long n = c ? strtol(c, NULL, 10) : 0;
  return n > 0 && n < 10000 ? (int)n : 80;
}

size_t altar_cli_progress_line(char *out, size_t size, int columns, size_t done, size_t failed, size_t total,
                               size_t groups_settled, size_t groups, size_t groups_dead, int elapsed_s) {
  if (!size) return 0;
  size_t width = columns > 1 ? (size_t)columns - 1 : 1;
  if (width > size - 1) width = size - 1;
  if (elapsed_s < 0) elapsed_s = 0;
  char text[160];
  size_t fin = done + failed;
  int n = snprintf(text, sizeof text, "%zu/%zu shards done, %zu failed; groups %zu/%zu, %zu dead; %02d:%02d", fin,
                   total, failed, groups_settled, groups, groups_dead, elapsed_s / 60, elapsed_s % 60);
  if (n < 0) n = 0;
  if ((size_t)n > width) /* narrow: the same facts, shorter */
    n = snprintf(text, sizeof text, "%zu/%zu %zu! g%zu/%zu %02d:%02d", fin, total, failed, groups_settled, groups,
                 elapsed_s / 60, elapsed_s % 60);
  size_t tl = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
  size_t bar = width > tl + 3 ? width - tl - 3 : 0; /* "[" bar "] " */
  if (bar > MAX_BAR) bar = MAX_BAR;
  size_t at = 0;
  if (bar >= MIN_BAR) {
    /* Succeeded shards fill with '#', failed ones with 'x' (at least one
     * cell when any failed): a bar full of failures must not look like
     * success. */
    size_t fill = total ? fin * bar / total : bar;
    if (fill > bar) fill = bar;
    size_t bad = total ? failed * bar / total : 0;
    if (failed && !bad) bad = 1;
    if (bad > fill) bad = fill;
    out[at++] = '[';
    for (size_t i = 0; i < bar; i++) out[at++] = i < fill - bad ? '#' : i < fill ? 'x' : '.';
    out[at++] = ']';
    out[at++] = ' ';
  }
  size_t room = width - at;
  size_t copy = tl < room ? tl : room;
  memcpy(out + at, text, copy);
  at += copy;
  out[at] = 0;
  return at;
}
