// An endless loop: the time limit stops it.
var n = 0; while (true) { n++; }
