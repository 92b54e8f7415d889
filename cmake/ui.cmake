# The admin web UI (web/, docs/UI.md): npm installs its locked packages and
# Vite builds it into ${CMAKE_BINARY_DIR}/ui, the folder the server serves
# by default (ui/ beside the binary). Node.js is needed at build time only.
option(HF_BUILD_UI "Build the web UI with npm" ON)
find_program(HF_NPM npm)
set(HF_WEB_DIR ${CMAKE_SOURCE_DIR}/web)
set(HF_UI_DIR ${CMAKE_BINARY_DIR}/ui)

if(HF_BUILD_UI AND NOT HF_NPM)
  message(WARNING "npm not found: the web UI is not built (scripts/install-deps.sh installs it)")
endif()

if(HF_BUILD_UI AND HF_NPM AND EXISTS ${HF_WEB_DIR}/package-lock.json)
  # npm ci only when the lock file changed (it rewrites node_modules).
  set(stamp ${HF_WEB_DIR}/node_modules/.package-lock.json)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${HF_NPM} ci --no-audit --no-fund --loglevel=error
    DEPENDS ${HF_WEB_DIR}/package.json ${HF_WEB_DIR}/package-lock.json
    WORKING_DIRECTORY ${HF_WEB_DIR}
    COMMENT "npm ci (web UI packages)")
  file(GLOB_RECURSE ui_sources CONFIGURE_DEPENDS
       ${HF_WEB_DIR}/src/* ${HF_WEB_DIR}/public/* ${HF_WEB_DIR}/index.html
       ${HF_WEB_DIR}/vite.config.*)
  add_custom_command(
    OUTPUT ${HF_UI_DIR}/index.html
    COMMAND ${HF_NPM} run build --silent -- --outDir ${HF_UI_DIR} --emptyOutDir
    DEPENDS ${stamp} ${ui_sources}
    WORKING_DIRECTORY ${HF_WEB_DIR}
    COMMENT "Building the web UI into ${HF_UI_DIR}")
  add_custom_target(hf_ui ALL DEPENDS ${HF_UI_DIR}/index.html)
  set(HF_UI_BUILT ON)
endif()
