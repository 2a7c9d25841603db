/* placeholder: replaced by the real program */
int main (void) { return 1; }
