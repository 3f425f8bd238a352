// Defines nothing: only a helper.
function unused() { return 1; }
