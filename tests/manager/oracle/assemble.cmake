# Assembles the kubelet oracle's module in the build tree (cmake -P, from
# tests/manager/CMakeLists.txt): our main.go, go.mod and go.sum, and as
# its package "devicemanager" the kubelet's device manager
# (k8s.io/kubernetes/pkg/kubelet/cm/devicemanager at the version go.mod
# pins, its files as the module proxy serves them, tests left out) with one
# file of ours, shim/devicemanager_oracle.go.in, that makes a manager over a
# directory of the oracle's and carries its state between admissions.
#
# In: GO, SOURCE_DIR (tests/manager/oracle), OUT_DIR.
execute_process(
  COMMAND ${GO} mod download -json k8s.io/kubernetes
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE _download
  RESULT_VARIABLE _result)
if(NOT _result EQUAL 0)
  message(FATAL_ERROR "go mod download k8s.io/kubernetes failed: ${_download}")
endif()
string(JSON _dir GET "${_download}" Dir)
set(_package ${_dir}/pkg/kubelet/cm/devicemanager)
if(NOT IS_DIRECTORY ${_package})
  message(FATAL_ERROR "no device manager package in ${_dir}")
endif()
file(REMOVE_RECURSE ${OUT_DIR})
file(MAKE_DIRECTORY ${OUT_DIR}/devicemanager)
foreach(_file main.go go.mod go.sum)
  file(COPY_FILE ${SOURCE_DIR}/${_file} ${OUT_DIR}/${_file})
endforeach()
file(GLOB _sources ${_package}/*.go)
foreach(_source IN LISTS _sources)
  get_filename_component(_name ${_source} NAME)
  if(NOT _name MATCHES "_test\\.go$")
    file(READ ${_source} _text)
    file(WRITE ${OUT_DIR}/devicemanager/${_name} "${_text}")
  endif()
endforeach()
file(COPY_FILE ${SOURCE_DIR}/shim/devicemanager_oracle.go.in
     ${OUT_DIR}/devicemanager/zz_oracle_shim.go)
