def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a full-size (GC200) check that takes a few seconds")
