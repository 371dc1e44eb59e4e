// argv, captured before main (see startup.c); the static front's hit path reads it from here.
#ifndef TOKENCTL_CPROCESSSTARTUP_H
#define TOKENCTL_CPROCESSSTARTUP_H

int tokenctl_front_argc(void);
char *const *tokenctl_front_argv(void);

#endif
