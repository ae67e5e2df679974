package runloop

// UUID7 exposes uuid7 to the tests.
var UUID7 = uuid7
