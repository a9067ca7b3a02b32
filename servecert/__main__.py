import sys

from servecert.cli import main

sys.exit(main())
