from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest
from tests.conformance.suite.sample_tests import _checks
from tests.conformance.suite.suite_helpers import SAMPLE_SEED

TEST = ConformanceTest(
    short_name="SampleDeploys",
    description="A deployment comes up with the expected frontend.",
    features=(features.DISAGGREGATED_SERVING,),
    cases=(Case("one-worker", {"workers": 1}), Case("two-workers", {"workers": 2})),
    check=_checks.deploy_and_expect_good_frontend,
    seed=SAMPLE_SEED,
)
