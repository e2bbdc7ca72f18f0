"""NAPALM driver for Linux routers managed by the Science DMZ Kit (platform sdmz_linux)."""
from napalm_sdmz_linux.driver import SdmzLinuxDriver

__all__ = ("SdmzLinuxDriver",)
