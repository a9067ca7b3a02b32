from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest
from tests.conformance.suite.sample_tests import _checks
from tests.conformance.suite.suite_helpers import SAMPLE_SEED

TEST = ConformanceTest(
    short_name="SampleError503",
    description="A provisional sample test.",
    features=(features.KV_TRANSFER_TOPOLOGY_ERROR_503,),
    provisional=True,
    check=_checks.deploy_and_expect_good_frontend,
    seed=SAMPLE_SEED,
)
