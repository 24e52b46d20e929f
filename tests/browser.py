"""The headless browser the page tests drive (report.html in a real chromium)."""

import os
import shutil

import pytest


def browser_or_skip():
  """A headless chromium WebDriver, or a skip naming the fix (a failure under ATTNMT_REQUIRE_BROWSER=1)."""
  chromium = shutil.which('chromium') or shutil.which('chromium-browser')
  driver = shutil.which('chromedriver')
  missing = [name for name, found in (('chromium', chromium), ('chromium-driver', driver)) if not found]
  try:
    from selenium import webdriver
  except ImportError:
    missing.append('selenium (pip install -e ".[dev]")')
  if missing:
    reason = f'no {", ".join(missing)}; run: sudo apt-get install -y chromium chromium-driver, or ./launch.sh setup'
    if os.environ.get('ATTNMT_REQUIRE_BROWSER') == '1':
      pytest.fail(reason)
    pytest.skip(reason)
  from selenium.webdriver.chrome.service import Service

  os.environ.setdefault('SE_OFFLINE', 'true')  # Selenium Manager must not look for drivers on the network
  options = webdriver.ChromeOptions()
  options.binary_location = chromium
  for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--window-size=1500,2400'):
    options.add_argument(arg)
  options.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
  return webdriver.Chrome(service=Service(executable_path=driver), options=options)
