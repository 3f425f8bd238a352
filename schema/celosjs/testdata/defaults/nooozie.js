// Defaults without CELOS_DEFAULT_*: workflows name their file system and
// Oozie themselves, or use the celos installation's defaults.
var HOURLY_INPUT = "${year}-${month}-${day}/${hour}00";
