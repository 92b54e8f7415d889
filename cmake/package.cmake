# Installation layout and the Debian package (scripts/package.sh builds it;
# docs/OPERATIONS.md, "Install on a cluster"). Paths follow the FHS whatever
# CMAKE_INSTALL_PREFIX is: the package installs under /usr, with its
# configuration in /etc/heteroflow and its units in /lib/systemd/system.
#
#   /usr/bin/heteroflow, /usr/bin/heteroflow-task-supervisor (the agent finds
#       the supervisor beside itself)
#   /usr/share/heteroflow/ui            the web UI (the server finds it from
#                                       its binary: ../share/heteroflow/ui)
#   /etc/heteroflow/{server,agent}.yaml conffiles
#   /lib/systemd/system/heteroflow-{server,agent}.service
#   /usr/share/doc/heteroflow/          copyright, changelog, the operator docs
set(HF_PKG ${CMAKE_SOURCE_DIR}/packaging)

if(TARGET heteroflow)
  install(TARGETS heteroflow heteroflow-task-supervisor RUNTIME DESTINATION bin)
endif()
if(HF_UI_BUILT)
  install(DIRECTORY ${HF_UI_DIR}/ DESTINATION share/heteroflow/ui)
endif()
install(FILES ${HF_PKG}/etc/server.yaml ${HF_PKG}/etc/agent.yaml DESTINATION /etc/heteroflow)
install(FILES ${HF_PKG}/systemd/heteroflow-server.service ${HF_PKG}/systemd/heteroflow-agent.service
        DESTINATION /lib/systemd/system)
# Debian wants the changelog compressed, without a time stamp (gzip -n).
set(HF_CHANGELOG_GZ ${CMAKE_BINARY_DIR}/packaging/changelog.gz)
add_custom_command(OUTPUT ${HF_CHANGELOG_GZ}
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/packaging
                   COMMAND gzip -9nc ${HF_PKG}/debian/changelog > ${HF_CHANGELOG_GZ}
                   DEPENDS ${HF_PKG}/debian/changelog)
add_custom_target(hf_changelog ALL DEPENDS ${HF_CHANGELOG_GZ})
install(FILES ${HF_PKG}/debian/copyright ${HF_CHANGELOG_GZ} DESTINATION share/doc/heteroflow)
install(FILES ${HF_PKG}/debian/lintian-overrides DESTINATION share/lintian/overrides RENAME heteroflow)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/OPERATIONS.md
              ${CMAKE_SOURCE_DIR}/docs/AGENT.md ${CMAKE_SOURCE_DIR}/docs/API.md
              ${CMAKE_SOURCE_DIR}/docs/SECURITY.md
        DESTINATION share/doc/heteroflow)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME heteroflow)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "scheduler for heterogeneous GPU clusters")
# The extended description (CPack puts the summary above it as the synopsis).
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
       "HeteroFlow places distributed training jobs and inference services on\n"
       "clusters of mixed GPUs with RDMA fabrics: gangs, queues with quotas and\n"
       "fair share, preemption, fractional GPUs and an OpenAI-style inference\n"
       "gateway, behind a REST API and a web UI. This package holds the server,\n"
       "the node agent and their systemd units.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "HeteroFlow maintainers <maintainers@heteroflow.dev>")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Library dependencies from the binaries (dpkg-shlibdeps), plus what the
# maintainer scripts call.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${HF_PKG}/debian/postinst ${HF_PKG}/debian/prerm ${HF_PKG}/debian/postrm
    ${HF_PKG}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
include(CPack)
