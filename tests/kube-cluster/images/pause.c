/* The pod sandbox's process: waits for a signal, reaps children, ends on
 * SIGINT or SIGTERM. Built with `gcc -static`, the only file of the test
 * cluster's pause image (no image registry is reachable). */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction action = {0};
  action.sa_handler = stop;
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  action.sa_handler = reap;
  action.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &action, NULL);
  for (;;) pause();
}
