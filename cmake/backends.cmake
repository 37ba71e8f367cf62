# The names of the transports this source tree declares, in priority order,
# as VSOCKET_TRANSPORT and the providers' name() spell them.  Each backend's
# CMakeLists.txt declares its own, whether or not its dependencies were
# found (a name the build lacks still selects kernel TCP at run time).
#
# vsocket_declare_transport(<name>)
function(vsocket_declare_transport name)
  set_property(GLOBAL APPEND PROPERTY VSOCKET_TRANSPORT_NAMES ${name})
endfunction()

# <out>: the declared names, in declaration order.
function(vsocket_transport_names out)
  get_property(names GLOBAL PROPERTY VSOCKET_TRANSPORT_NAMES)
  set(${out} ${names} PARENT_SCOPE)
endfunction()
