// The static front's argv, captured before main (see startup.c).
#ifndef TOKENCTL_CFRONTSTARTUP_H
#define TOKENCTL_CFRONTSTARTUP_H

int tk_front_argc(void);
char *const *tk_front_argv(void);

#endif
