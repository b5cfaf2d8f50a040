/* main.c - logdiff's command table and dispatcher (placeholder until the
 * subcommands land; replaced below in this session). */
#include <stdio.h>
int main(void) { return 0; }
