/* The baseline of startup_benchmark: a process that does nothing. */
int main(void) { return 0; }
