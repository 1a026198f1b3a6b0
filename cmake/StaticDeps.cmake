# dml_prefer_static_archives(PREFIX...): points the imported library targets
# whose names start with one of PREFIX (absl::, CapnProto::, ...) at the
# static archive next to their shared library, where the system has one
# (Debian's -dev packages ship both, built position-independent).
#
# Why: a one-process dml-train run loaded some 40 shared libraries (Abseil
# alone is 30) before reading a byte, 8-10 ms of start-up on a machine where
# liblinear-train starts in under 1 ms; on a9a-sized data that is a tenth of
# the whole run. Only the link changes: users' targets still get these
# dependencies by name from dmlConfig.cmake, and a library without an archive
# stays shared.
function(dml_prefer_static_archives)
  get_directory_property(imported IMPORTED_TARGETS)
  set(switched 0)
  foreach(target IN LISTS imported)
    set(match FALSE)
    foreach(prefix IN LISTS ARGN)
      string(FIND "${target}" "${prefix}" at)
      if(at EQUAL 0)
        set(match TRUE)
      endif()
    endforeach()
    get_target_property(type ${target} TYPE)
    if(NOT match OR NOT type MATCHES "^(SHARED_LIBRARY|UNKNOWN_LIBRARY)$")
      continue()
    endif()
    get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
    set(properties IMPORTED_LOCATION)
    if(configs)
      foreach(config IN LISTS configs)
        string(TOUPPER "${config}" config)
        list(APPEND properties IMPORTED_LOCATION_${config})
      endforeach()
    endif()
    set(target_switched FALSE)
    foreach(property IN LISTS properties)
      get_target_property(location ${target} ${property})
      if(NOT location OR NOT location MATCHES "\\.so(\\.[0-9]+)*$")
        continue()
      endif()
      get_filename_component(dir "${location}" DIRECTORY)
      get_filename_component(name "${location}" NAME)
      string(REGEX REPLACE "\\.so(\\.[0-9]+)*$" "" stem "${name}")
      # libcapnp-0.9.2.so's archive is libcapnp.a.
      string(REGEX REPLACE "-[0-9][0-9.]*$" "" unversioned "${stem}")
      foreach(candidate "${dir}/${stem}.a" "${dir}/${unversioned}.a")
        if(EXISTS "${candidate}")
          set_target_properties(${target} PROPERTIES ${property} "${candidate}")
          set(target_switched TRUE)
          break()
        endif()
      endforeach()
    endforeach()
    if(target_switched)
      # IMPORTED_NO_SONAME is left alone: set, CMake links such a library as
      # -l<name>, which finds the shared one again.
      math(EXPR switched "${switched} + 1")
    endif()
  endforeach()
  message(STATUS "libdml: ${switched} dependency targets linked from static archives")
endfunction()
