#include "common/infra/cli.h"

#include <iostream>

#include "common/version.h"

namespace zeroshard {

const char* Version() { return kZeroshardVersion; }

void AddVersionFlag(CLI::App& app) {
  app.set_version_flag("--version", std::string(app.get_name()) + " " + Version());
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 checks required options before unknown ones; an unknown flag is
    // the more useful thing to name.
    const std::vector<std::string> extras = app.remaining(true);
    if (!extras.empty()) {
      std::cerr << app.get_name() << ": unknown argument " << extras.front() << " (see --help)\n";
    } else {
      std::cerr << app.get_name() << ": " << e.what() << " (see --help)\n";
    }
    return 2;
  }
}

}  // namespace zeroshard
