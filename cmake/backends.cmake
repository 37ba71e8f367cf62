# A backend (a transport and its provider, in a folder of its own) is
# declared once, by its own CMakeLists.txt, with vsocket_backend(); the
# library (providers/), the interposer (preload/), vsocket-run, the
# conformance suite (tests/conformance/) and the install (cmake/install.cmake)
# read the declarations with the functions below and name no backend.
#
# vsocket_backend(NAME <name>
#                 [OBJECTS <object library>...]
#                 [LIBRARIES <library>...]
#                 [INSTALL_LIBRARIES <name>...]
#                 [PRELOAD_LIBRARIES <library or target>...]
#                 [CONFORMANCE HOST|DEVICE])
#   NAME               as VSOCKET_TRANSPORT and the provider's name() spell
#                      it; vsocket-run accepts it.  Declared in priority
#                      order (the top CMakeLists.txt's add_subdirectory order).
#   OBJECTS            its object libraries, linked into libvsocket (.so/.a)
#                      and the interposer; none when its dependencies were
#                      not found: the name is still declared (and selects
#                      kernel TCP at run time: transport_unavailable).
#                      Compiling providers/builtin_providers.cc with them
#                      defines VSOCKET_HAVE_<NAME> (upper case) and their
#                      include directories.
#   LIBRARIES          what a binary with its objects links (paths or targets).
#   INSTALL_LIBRARIES  the same by link name, for an installed libvsocket.a
#                      (the exported target and vsocket.pc's Libs.private).
#   PRELOAD_LIBRARIES  the interposer's, when they differ from LIBRARIES.
#   CONFORMANCE        where the conformance suite runs it: HOST (default) in
#                      conformance_test; DEVICE only where its device is
#                      (tests/rdma's rdma_conformance_test).
function(vsocket_backend)
  cmake_parse_arguments(PARSE_ARGV 0 B "" "NAME;CONFORMANCE"
                        "OBJECTS;LIBRARIES;INSTALL_LIBRARIES;PRELOAD_LIBRARIES")
  if(NOT B_NAME OR B_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "vsocket_backend: NAME <name> [OBJECTS ...] ... "
                        "(unparsed: ${B_UNPARSED_ARGUMENTS})")
  endif()
  if(NOT B_CONFORMANCE)
    set(B_CONFORMANCE HOST)
  endif()
  if(NOT B_CONFORMANCE MATCHES "^(HOST|DEVICE)$")
    message(FATAL_ERROR "vsocket_backend(${B_NAME}): CONFORMANCE is HOST or DEVICE")
  endif()
  if(NOT B_PRELOAD_LIBRARIES)
    set(B_PRELOAD_LIBRARIES ${B_LIBRARIES})
  endif()
  set_property(GLOBAL APPEND PROPERTY VSOCKET_BACKENDS ${B_NAME})
  if(B_OBJECTS)
    set_property(GLOBAL APPEND PROPERTY VSOCKET_BUILT_BACKENDS ${B_NAME})
  endif()
  foreach(field OBJECTS LIBRARIES INSTALL_LIBRARIES PRELOAD_LIBRARIES CONFORMANCE)
    set_property(GLOBAL PROPERTY VSOCKET_BACKEND_${B_NAME}_${field} ${B_${field}})
  endforeach()
endfunction()

# <out>: the declared backends' names, in declaration order; with BUILT,
# those whose objects this build has; with CONFORMANCE HOST|DEVICE, the
# built ones the conformance suite runs there.
function(vsocket_backend_names out)
  cmake_parse_arguments(PARSE_ARGV 1 A "BUILT" "CONFORMANCE" "")
  if(A_BUILT OR A_CONFORMANCE)
    get_property(names GLOBAL PROPERTY VSOCKET_BUILT_BACKENDS)
  else()
    get_property(names GLOBAL PROPERTY VSOCKET_BACKENDS)
  endif()
  if(A_CONFORMANCE)
    set(kept)
    foreach(name IN LISTS names)
      get_property(where GLOBAL PROPERTY VSOCKET_BACKEND_${name}_CONFORMANCE)
      if(where STREQUAL A_CONFORMANCE)
        list(APPEND kept ${name})
      endif()
    endforeach()
    set(names ${kept})
  endif()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

# <out>: <field> (OBJECTS, LIBRARIES, INSTALL_LIBRARIES, PRELOAD_LIBRARIES)
# of every built backend, in declaration order.
function(vsocket_backend_field out field)
  vsocket_backend_names(names BUILT)
  set(values)
  foreach(name IN LISTS names)
    get_property(v GLOBAL PROPERTY VSOCKET_BACKEND_${name}_${field})
    list(APPEND values ${v})
  endforeach()
  set(${out} ${values} PARENT_SCOPE)
endfunction()

# Compiles <target> (an object library that includes the backends' headers:
# the assembly) with VSOCKET_HAVE_<NAME>=1 and the include directories of
# every built backend's objects.
function(vsocket_backend_compile target)
  vsocket_backend_names(names BUILT)
  foreach(name IN LISTS names)
    string(TOUPPER "${name}" upper)
    target_compile_definitions(${target} PRIVATE VSOCKET_HAVE_${upper}=1)
    get_property(objects GLOBAL PROPERTY VSOCKET_BACKEND_${name}_OBJECTS)
    foreach(o IN LISTS objects)
      target_include_directories(${target} PRIVATE
        $<TARGET_PROPERTY:${o},INTERFACE_INCLUDE_DIRECTORIES>)
    endforeach()
  endforeach()
endfunction()
