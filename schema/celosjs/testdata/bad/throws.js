function check(x) {
    if (!x) {
        throw new Error("no input configured");
    }
}
check(false);
