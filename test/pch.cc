// Translation unit of the tests' shared precompiled header (its contents come from CMake).
