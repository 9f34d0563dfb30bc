/* altar — implementing a log transport: what a plug-in needs beyond the user's
 * altar/transport.h. */
#ifndef ALTAR_PLUGIN_TRANSPORT_H
#define ALTAR_PLUGIN_TRANSPORT_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/transport.h"

ALTAR_API_END

#endif
