/* The one-line progress display of a followed job, fitted to the terminal. */
#ifndef ALTAR_CLI_PROGRESS_BAR_H
#define ALTAR_CLI_PROGRESS_BAR_H

#include <stddef.h>

/* Columns of the terminal on fd (TIOCGWINSZ), else $COLUMNS, else 80. */
int altar_cli_terminal_columns(int fd);

/* Writes into out (NUL-terminated) a progress line at most columns - 1 bytes
 * long (the last column stays free so a terminal never wraps it):
 * "[###x......] 4/10 shards done, 1 failed; groups 1/2, 0 dead; 00:07" ('#'
 * succeeded, 'x' failed), the bar as wide as
 * the rest allows, dropped below 5 columns, the text shortened and finally
 * cut when even that does not fit. Returns the length written. */
size_t altar_cli_progress_line(char *out, size_t size, int columns, size_t done, size_t failed, size_t total,
                               size_t groups_settled, size_t groups, size_t groups_dead, int elapsed_s);

#endif
