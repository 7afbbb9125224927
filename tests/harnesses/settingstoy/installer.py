"""The toy's installer: its hooks in <home or project>/.settingstoy/settings.json, through the kit."""

from kijito_pull.harnesses import installkit
from kijito_pull.harnesses.settingshooks import SettingsHooks
from tests.harnesses.settingstoy import HARNESS


def settings_path(scope, environ, project):
    return (installkit.home(environ) if scope == installkit.USER else project) / ".settingstoy" / "settings.json"


KIT = SettingsHooks(HARNESS, settings_path)
install, uninstall, wiring, add_arguments = KIT.install, KIT.uninstall, KIT.wiring, KIT.add_arguments
