"""extras.theory.futurefeat: where "seemingly useless" features come from — the next-token gradient split into shared, direct and pre-cached parts."""
