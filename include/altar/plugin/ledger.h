/* altar — implementing a task ledger: what a plug-in needs beyond the user's
 * altar/ledger.h. */
#ifndef ALTAR_PLUGIN_LEDGER_H
#define ALTAR_PLUGIN_LEDGER_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/ledger.h"

ALTAR_API_END

#endif
