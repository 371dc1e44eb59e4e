#ifndef TOKENCTL_CQRENCODE_SHIM_H
#define TOKENCTL_CQRENCODE_SHIM_H

// libqrencode needs no wrappers: its API has no variadic calls or macros tokenctl uses.
#include <qrencode.h>

#endif
