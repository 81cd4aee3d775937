"""Small shipped files: behaviour-policy weights, their measured returns, fixtures."""
from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
