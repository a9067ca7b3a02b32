"""Report writers: the versioned conformance report, JUnit, allure results, HTML pages."""
