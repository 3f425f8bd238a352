// The installation's defaults, as Celos's collective.js had them.
var CELOS_USER = "celos";
var CELOS_DEFAULT_OOZIE = "http://oozie.example.com:11000/oozie";
var CELOS_DEFAULT_HDFS = "hdfs://nameservice1";
var CELOS_DEFAULT_OOZIE_PROPERTIES = {
    "user.name": CELOS_USER,
    "jobTracker": "rm.example.com:8032",
    "nameNode": CELOS_DEFAULT_HDFS
};

// appPath is a helper every project uses.
function appPath(project) {
    return "/user/celos/app/" + project + "/workflow.xml";
}
